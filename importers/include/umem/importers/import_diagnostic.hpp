// A line of a text capture that an importer did not understand and therefore did not use.
#pragma once

#include <string>

namespace umem::importers {

// Importers never guess: a line whose structure or key they do not know is skipped and reported
// here, so the caller can show the user what was left out of the model.
struct import_diagnostic {
  int line = 0;         // 1-based line number in the input
  std::string text;     // the line as it appears in the input (without the line break)
  std::string message;  // why it was not used
  bool operator==(const import_diagnostic&) const = default;
};

}  // namespace umem::importers
