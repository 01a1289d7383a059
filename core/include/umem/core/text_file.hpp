// Reading a whole user-named input file (a capture, a snapshot) with an error a user can act on.
#pragma once

#include <filesystem>
#include <string>

namespace umem {

// Throws umem::error(not_found) if the file does not exist, io_error if it cannot be read.
// `what` names the file's role in the message ("rocminfo capture").
std::string read_text_file(const std::filesystem::path& file, const std::string& what);

}  // namespace umem
