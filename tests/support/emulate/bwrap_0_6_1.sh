#!/bin/sh
# Stands in for Ubuntu 22.04's bubblewrap 0.6.1 (what Gradescope's setup.sh gets from apt): --size (which
# arrived in 0.7.0) is refused as 0.6.1 refuses it ("Unknown option"), and --help does not list it.
# Everything else goes to the real bwrap linked beside this script as `real-bwrap`
# (tests/support/emulate/gradescope.py lays the two out). Checked against a bwrap 0.6.1 built from its tag.
real="$(dirname "$0")/real-bwrap"
for a in "$@"; do
  case "$a" in
    --size) echo "bwrap: Unknown option $a" >&2; exit 1 ;;
    --) break ;;
  esac
done
case "${1:-}" in
  --version) echo "bubblewrap 0.6.1"; exit 0 ;;
  --help) "$real" --help | grep -v -e '--size'; exit 0 ;;
esac
exec "$real" "$@"
