// The process environment as a map, so that what reads it (rank discovery, object-store
// configuration) can be given another in tests. Thread-safe as long as nobody calls setenv.
#ifndef DDPIO_COMMON_ENVIRONMENT_H_
#define DDPIO_COMMON_ENVIRONMENT_H_

#include <map>
#include <string>

namespace ddpio {

using Environment = std::map<std::string, std::string>;

// This process's environment.
Environment CurrentEnvironment();
// The variable's value; "" when unset.
std::string EnvValue(const Environment& env, const std::string& name);

}  // namespace ddpio

#endif  // DDPIO_COMMON_ENVIRONMENT_H_
