// Private to the backends: how a built-in backend makes itself known. Each registers, as the
// program starts, its device provider with core (register_backend_provider) and its evaluator
// with ir (register_evaluator): core and ir name no concrete backend. The registration runs
// in a constructor of priority FLAXPP_REGISTRATION_PRIORITY, before any ordinary static
// initialiser (a test's is_available(DeviceKind::cuda) at its start sees the GPU), and is
// linked in because flaxpp::flaxpp links the backends library whole.
#pragma once

// GCC and Clang run constructors of priority 101..65535 before those without one.
#define FLAXPP_REGISTRATION_PRIORITY 101
