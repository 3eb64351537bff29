#include "ddpio/common/environment.h"

extern char** environ;

namespace ddpio {

Environment CurrentEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string EnvValue(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

}  // namespace ddpio
