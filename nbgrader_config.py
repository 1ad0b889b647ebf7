# nbgrader reads nbgrader_config.py from the course root (here, the repository root);
# the course's configuration lives in autograder/inside/nbgrader_config.py.
c = get_config()  # noqa: F821
load_subconfig("autograder/inside/nbgrader_config.py")  # noqa: F821
