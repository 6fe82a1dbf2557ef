"""Files the repository stores compressed, unpacked where the tools read them (standard library only).

The Qwen3 tokenizer.json (11.4 MB) is stored as resources/tokenizers/qwen3/tokenizer.json.tar.xz
(tools/pack_qwen3_tokenizer.sh), so that the working tree stays small enough to travel to a lent
GPU; the build unpacks it at configure time and embeds it, the Python tools call unpacked()."""
import os
import tarfile
import tempfile


def unpacked(path):
    """`path` itself, unpacked first from `path`.tar.xz (a tar holding one member named as `path`'s
    base name) when that archive exists and the file is missing or older; the unpacked copy lies
    next to the archive (git ignores it). Any other path is returned as is."""
    path = str(path)
    archive = path + ".tar.xz"
    if not os.path.exists(archive):
        return path
    if os.path.exists(path) and os.path.getmtime(path) >= os.path.getmtime(archive):
        return path
    with tarfile.open(archive, "r:xz") as tar:
        data = tar.extractfile(tar.getmember(os.path.basename(path))).read()
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    return path
