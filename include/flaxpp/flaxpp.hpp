// flaxpp/flaxpp.hpp — the umbrella header: everything a user of flaxpp needs.
#pragma once

#include "flaxpp/core/array.hpp"
#include "flaxpp/core/backend.hpp"
#include "flaxpp/core/device.hpp"
#include "flaxpp/core/dtype.hpp"
#include "flaxpp/core/error.hpp"
#include "flaxpp/core/shape.hpp"
#include "flaxpp/core/tree.hpp"
#include "flaxpp/io/json.hpp"
#include "flaxpp/io/refs.hpp"
#include "flaxpp/random/distributions.hpp"
#include "flaxpp/random/initializers.hpp"
#include "flaxpp/random/key.hpp"
