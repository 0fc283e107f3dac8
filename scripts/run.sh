#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds stfs,
# writes the example model, mounts it, shows what a user sees (listing,
# dtype, shape, sizes, a python3 read of `data`), then unmounts.
# --keep leaves the mount up and prints how to unmount it.
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

./scripts/setup.sh
./scripts/build.sh >/dev/null
build_dir="${STFS_BUILD_DIR:-build}"
stfs="$build_dir/fs/stfs"
model="$build_dir/example/model.safetensors"
mnt="$build_dir/example/mnt"
mkdir -p "$build_dir/example" "$mnt"
python3 scripts/make_example.py "$model"
if mountpoint -q "$mnt"; then fusermount3 -u "$mnt"; fi

show() { echo; echo "\$ $*"; "$@"; }

show "$stfs" inspect "$model"
show "$stfs" "$model" "$mnt"
trap '[ $keep = 1 ] || fusermount3 -u "$mnt"' EXIT
show ls "$mnt"
show ls -l "$mnt/embedding"
show cat "$mnt/embedding/dtype"
show cat "$mnt/embedding/shape"
show cat "$mnt/__metadata__"
show stat -c '%s bytes  %n' "$mnt/embedding/data" "$mnt/lm_head%2Fbias/data"
show dd if="$mnt/embedding/data" bs=4096 skip=2 count=4 status=none of=/dev/null
echo "(read 16 KiB at offset 8 KiB of embedding/data)"
show cat "$mnt/embedding/slices/10:20, 32:/shape"
echo "(a slice view: rows 10..19, columns 32.. of embedding, read on demand)"
show python3 - "$mnt" <<'PY'
import json, mmap, struct, sys
mnt = sys.argv[1]
shape = json.load(open(f"{mnt}/embedding/shape"))
with open(f"{mnt}/embedding/data", "rb") as f:
    row = f.read(shape[1] * 2)                      # plain read: row 0
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)  # mmap: row 999
    last = m[(shape[0] - 1) * shape[1] * 2:]
print("embedding", shape, "row 0:", [round(v, 4) for v in struct.unpack("<4e", row[:8])], "...")
print("embedding row 999:", [round(v, 4) for v in struct.unpack("<4e", last[:8])], "...")
print("step =", struct.unpack("<q", open(f"{mnt}/step/data", "rb").read())[0])
PY
if [ $keep = 1 ]; then
  echo; echo "mounted at $mnt; unmount with: fusermount3 -u $mnt"
else
  echo; echo "done; run with --keep to leave $mnt mounted"
fi
