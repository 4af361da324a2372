// Umbrella header.
#pragma once

#include "dnngraph/engines/cudnn.hpp"
#include "dnngraph/engines/handle.hpp"
#include "dnngraph/engines/interface.hpp"
#include "dnngraph/engines/kernel_cache.hpp"
#include "dnngraph/graph.hpp"
#include "dnngraph/ir/dot.hpp"
#include "dnngraph/ir/fingerprint.hpp"
#include "dnngraph/ir/graph.hpp"
#include "dnngraph/ir/json.hpp"
#include "dnngraph/ir/sdpa.hpp"
#include "dnngraph/log.hpp"
#include "dnngraph/status.hpp"
#include "dnngraph/storage.hpp"
#include "dnngraph/system.hpp"
#include "dnngraph/types.hpp"
#include "dnngraph/version.hpp"
