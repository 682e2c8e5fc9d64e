#include <tensordict/errors.h>

namespace tensordict {

Error::Error(std::string message)
    : std::runtime_error(message), message_(message), full_(std::move(message)) {}

void Error::add_context(std::string context) {
  full_ += "\n  ";
  full_ += context;
}

}  // namespace tensordict
