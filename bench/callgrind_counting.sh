# What the callgrind counting scripts share (bench/instructions-per-op.sh,
# bench/torch_bridge/host-instructions-per-op.sh); sourced after `set -euo pipefail`, with
# `script` set to the script's name for its messages. It takes the script's arguments as sizes
# (default 256 4096 65536) into the array `sizes`, checks that each is a number of bytes and that
# valgrind is installed, and makes `work`, a temporary folder removed on exit.

sizes=("$@")
[ "${#sizes[@]}" -gt 0 ] || sizes=(256 4096 65536)
for s in "${sizes[@]}"; do
  [[ "$s" =~ ^[1-9][0-9]*$ ]] || { echo "$script: size '$s' is not a number of bytes" >&2; exit 2; }
done
command -v valgrind > /dev/null ||
  { echo "$script: needs valgrind (apt install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
