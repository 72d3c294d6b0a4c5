// SHA-1 of a byte string (FIPS 180-4), for Flax's rng-key derivation only (not for security).
// Private to the nn layer.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace flaxpp::nn::internal {

std::array<std::uint8_t, 20> sha1(std::string_view bytes);

}  // namespace flaxpp::nn::internal
