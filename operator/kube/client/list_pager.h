// A list read in pages: client-go's tools/pager.ListPager with
// FullListIfExpired. The pages of a paginated list are one snapshot at the
// first page's resourceVersion; when the server compacts that snapshot away
// before the last page (410 Gone on a page that carries a continue token), the
// list is read again whole, without limit or continue, at the resourceVersion
// first asked for, instead of starting over in pages that may expire again
// (a hot loop for a list that takes longer than the compaction interval).
#pragma once

#include <functional>
#include <string>

#include "common/result.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/client/request_options.h"

namespace fulcrum::kube {

// Reads one page (honouring limit and continue_token) and hands its items to
// wherever the caller collects them; returns the page's version and continue token.
using ListPageFunction = std::function<Result<ObjectList>(const ListOptions& options)>;

struct PagedList {
  std::string resource_version;         // of the snapshot (the first page's)
  int pages = 0;                        // requests made, the full list included
  bool full_list_after_expiry = false;  // a continued page got 410 and the list was read whole
};

// Reads all pages of `options` through `page`. Before the full list that
// follows an expired continue token, `discard` is called: drop the items the
// earlier pages delivered, the full list brings them all again. A 410 on the
// first page (no continue token) is returned: the caller's resourceVersion is
// too old, which only the caller can decide about.
Result<PagedList> ListAllPages(const ListOptions& options, const ListPageFunction& page,
                               const std::function<void()>& discard);

}  // namespace fulcrum::kube
