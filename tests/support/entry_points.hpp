/*
 * SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
 * SPDX-License-Identifier: Apache-2.0
 */
#pragma once

// The one way a test program's fake driver answers cudaGetDriverEntryPointByVersion: from a table
// of the entry points it defines, every other name not found.

#include <cuda_runtime_api.h>

#include <map>
#include <string>

namespace rmm_next::test {

/** @brief A table of driver entry points: name -> function. */
using entry_point_table = std::map<std::string, void*>;

/** @brief What cudaGetDriverEntryPointByVersion answers for `symbol` from `entries`. */
inline cudaError_t answer_entry_point(entry_point_table const& entries,
                                      char const* symbol,
                                      void** function,
                                      cudaDriverEntryPointQueryResult* status)
{
  auto const it = entries.find(symbol);
  *function     = it == entries.end() ? nullptr : it->second;
  if (status != nullptr) {
    *status =
      it == entries.end() ? cudaDriverEntryPointSymbolNotFound : cudaDriverEntryPointSuccess;
  }
  return cudaSuccess;
}

}  // namespace rmm_next::test
