// flaxpp/io/policy_spec.hpp — remat policies written as JSON (refs-format's "policy spec",
// also used by configs and the command line): a string naming a policy without arguments, or
// "none" (no checkpoint), or an object {"name": ..., <JAX's parameter names>...}.
#pragma once

#include <optional>
#include <string>

#include "flaxpp/io/json.hpp"
#include "flaxpp/transforms/checkpoint.hpp"

namespace flaxpp::io {

// The policy a spec denotes; checkpoint_policies::none() for "none" (no checkpoint at all). Throws
// ParseError naming `path` and what is accepted for a malformed spec, and ValueError for a
// policy JAX itself rejects (e.g. overlapping saved/offloaded names).
PolicyPtr policy_from_spec(const Json& spec, const std::string& path = "$");
// Parses the text of a spec: a bare policy name, "none", or a JSON object.
PolicyPtr policy_from_spec_text(const std::string& text);

}  // namespace flaxpp::io
