/* AltGrad plugin ABI, version 1: everything a plugin or a host includes.
 *
 * One concept per header:
 *   abi/version.h       ABI and plugin versions, the compatibility rule
 *   abi/status.h        status codes, the error object, struct growth
 *   abi/params.h        typed parameters
 *   abi/format.h        number-format plugins
 *   abi/tensor.h        borrowed tensor views
 *   abi/state.h         saved plugin state (1.1)
 *   abi/intervention.h  stability-intervention plugins
 *   abi/diagnostic.h    diagnostic plugins
 *   abi/transform.h     transform plugins (1.4)
 *   abi/accumulator.h   accumulator plugins: one MMA instruction (1.5)
 *   abi/entry.h         the one exported symbol and the descriptor
 *
 * C++ plugin authors usually include <altgrad/sdk/format_plugin.hpp> instead,
 * which wraps all of this.
 */
#ifndef ALTGRAD_ALTGRAD_H
#define ALTGRAD_ALTGRAD_H

#include "abi/accumulator.h"
#include "abi/diagnostic.h"
#include "abi/entry.h"
#include "abi/format.h"
#include "abi/intervention.h"
#include "abi/params.h"
#include "abi/state.h"
#include "abi/status.h"
#include "abi/tensor.h"
#include "abi/transform.h"
#include "abi/version.h"

#endif /* ALTGRAD_ALTGRAD_H */
