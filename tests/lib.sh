# Helpers the shell tests share (sourced, not run): their set-up and their verdict lines.

# test_setup OCTET SRC: octet and src, a scratch folder tmp (removed on exit), fail=0; mpirun may run as root and
# oversubscribe the cores.
test_setup() {
  octet=$1 src=$2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  fail=0
}
# mnist_setup OCTET SRC: test_setup, and data (the repository's real MNIST, which must be there).
mnist_setup() {
  data=$2/datasets/mnist-22k
  [[ -d $data ]] || { echo "FAIL: real MNIST expected at $data"; exit 1; }
  test_setup "$@"
}
bad() { echo "FAIL: $*"; fail=1; }
# field FILE KEY: a number from a flat JSON file such as a run's summary.json.
field() { grep -o "\"$2\":[0-9.e+-]*" "$1" | cut -d: -f2; }
