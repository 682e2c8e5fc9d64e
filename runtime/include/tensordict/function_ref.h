#pragma once
// A non-owning reference to a callable, for callbacks that must not allocate.

#include <cstdint>
#include <type_traits>
#include <utility>

namespace tensordict {

template <typename Fn>
class FunctionRef;

template <typename Ret, typename... Args>
class FunctionRef<Ret(Args...)> {
 public:
  template <typename Callable,
            typename = std::enable_if_t<!std::is_same<std::decay_t<Callable>, FunctionRef>::value>>
  FunctionRef(Callable&& callable)
      : callable_(reinterpret_cast<intptr_t>(&callable)),
        call_([](intptr_t c, Args... args) -> Ret {
          return (*reinterpret_cast<std::remove_reference_t<Callable>*>(c))(
              std::forward<Args>(args)...);
        }) {}

  Ret operator()(Args... args) const { return call_(callable_, std::forward<Args>(args)...); }

 private:
  intptr_t callable_;
  Ret (*call_)(intptr_t, Args...);
};

}  // namespace tensordict
