"""Stand-ins for the machines instructors grade on, as far as this machine can emulate them."""
