# Helper of the scripts that compare this tree with a commit BASE
# (bench/writecost.sh, bench/writecpu.sh); source it from the repository
# root with BASE and NAME (the script's name) set. It makes a temporary
# directory $DIR, checks BASE out into $OLD ($DIR/base), sets NEW to this
# tree, removes both on exit, and prints what it compares (with $EXTRA
# after it) and the load average.
DIR=$(mktemp -d "/tmp/formsapi-$NAME.XXXXXX")
OLD=$DIR/base
cleanup() {
  git worktree remove --force "$OLD" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
git worktree add --detach "$OLD" "$BASE" >/dev/null 2>&1
NEW=$PWD
echo "this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with changes)'); base: $(git -C "$OLD" rev-parse --short HEAD)${EXTRA:-}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
