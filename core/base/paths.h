// Where ContextCache keeps its files.
#pragma once

#include <filesystem>

namespace cc {

// $XDG_CACHE_HOME/contextcache, else $HOME/.cache/contextcache (DESIGN §7). Not created here.
std::filesystem::path default_cache_dir();

// Creates `dir` (and parents) with mode 0700 when missing. Throws naming the directory.
void ensure_private_dir(const std::filesystem::path& dir);

}  // namespace cc
