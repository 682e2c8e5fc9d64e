#include <tensordict/dtype.h>

#include <torch/version.h>

namespace tensordict {

namespace {

struct Row {
  c10::ScalarType dtype;
  std::string_view name;  // its length known: a lookup by name compares lengths first
};

constexpr Row kRows[] = {
#define TENSORDICT_DTYPE_ROW(enumerator, name) {c10::enumerator, name},
    TENSORDICT_FORALL_DTYPES(TENSORDICT_DTYPE_ROW)
#undef TENSORDICT_DTYPE_ROW
// Unsigned wide integers exist from LibTorch 2.3 on; Python tensordict stores them too.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
    {c10::kUInt16, "uint16"},
    {c10::kUInt32, "uint32"},
    {c10::kUInt64, "uint64"},
#endif
};

// Named in repr and messages, but not stored: their files would need quantizer parameters.
constexpr Row kUnstorable[] = {
    {c10::kQInt8, "qint8"}, {c10::kQUInt8, "quint8"}, {c10::kQInt32, "qint32"}, {c10::kQUInt4x2, "quint4x2"}};

const Row* find(c10::ScalarType dtype) {
  for (const Row& r : kRows) {
    if (r.dtype == dtype) return &r;
  }
  return nullptr;
}

}  // namespace

std::string short_dtype_name(c10::ScalarType dtype) {
  if (const Row* r = find(dtype)) return std::string(r->name);
  for (const Row& r : kUnstorable) {
    if (r.dtype == dtype) return std::string(r.name);
  }
  return c10::toString(dtype);
}

std::string torch_dtype_name(c10::ScalarType dtype) {
  // Built in place (most names fit a short string): one per leaf when a tensordict is stored.
  if (const Row* r = find(dtype)) return std::string("torch.").append(r->name);
  return "torch." + short_dtype_name(dtype);
}

std::optional<c10::ScalarType> dtype_from_torch_name(std::string_view name) {
  constexpr std::string_view prefix = "torch.";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  for (const Row& r : kRows) {
    if (name == r.name) return r.dtype;
  }
  return std::nullopt;
}

bool is_storable_dtype(c10::ScalarType dtype) { return find(dtype) != nullptr; }

}  // namespace tensordict
