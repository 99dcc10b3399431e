#include "operator/kube/client/list_pager.h"

namespace fulcrum::kube {

Result<PagedList> ListAllPages(const ListOptions& options, const ListPageFunction& page,
                               const std::function<void()>& discard) {
  PagedList result;
  ListOptions next = options;
  while (true) {
    ++result.pages;
    auto got = page(next);
    if (!got.ok()) {
      if (got.error().code != ErrorCode::kExpired || next.continue_token.empty()) {
        return got.error();
      }
      // The snapshot expired mid-way: read it whole, as first asked, in one response.
      ListOptions full = options;
      full.limit = 0;
      full.continue_token.clear();
      discard();
      ++result.pages;
      auto whole = page(full);
      if (!whole.ok()) return whole.error();
      result.resource_version = whole->resource_version;
      result.full_list_after_expiry = true;
      return result;
    }
    if (result.resource_version.empty()) result.resource_version = got->resource_version;
    if (got->continue_token.empty()) return result;
    next.continue_token = got->continue_token;
    // A continued list is served from the first page's snapshot; the version
    // must not be repeated alongside the token.
    next.resource_version.clear();
    next.resource_version_match.clear();
  }
}

}  // namespace fulcrum::kube
