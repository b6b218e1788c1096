#pragma once
// One line per op family: each family's register function adds its ops to the registry.
namespace sol {
void register_copy_ops();
void register_cast_ops();

inline void register_builtin_ops() {
  register_copy_ops();
  register_cast_ops();
}
}  // namespace sol
