// Umbrella header.
#pragma once

#include "dnngraph/engine.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/handle.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/serialize.hpp"
#include "dnngraph/kernel_cache.hpp"
#include "dnngraph/log.hpp"
#include "dnngraph/status.hpp"
#include "dnngraph/storage.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/types.hpp"
#include "dnngraph/version.hpp"
