// Used only while evaluator/rules (korch_rules) is absent from the tree.
namespace korch::evaluator {
const char* rules_python_dir() { return KORCH_RULES_PYDIR; }
}  // namespace korch::evaluator
