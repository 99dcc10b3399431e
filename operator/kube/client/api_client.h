// The verbs of the Kubernetes API on any resource, built-in or custom: what
// client-go's dynamic client offers, with objects as JSON and errors as
// values (NotFound, AlreadyExists, Conflict, Invalid with the field, ...).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "operator/kube/cache/cached_object.h"
#include "operator/kube/client/object_meta.h"
#include "operator/kube/client/request_options.h"
#include "operator/kube/client/resource.h"
#include "operator/kube/rest/rest_client.h"
#include "operator/kube/watch/watch_stream.h"

namespace fulcrum::kube {

enum class ListEncoding { kJson, kProtobufForBuiltIns };

struct ObjectList {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // of the list: watch from here
  std::string continue_token;    // non-empty: more pages follow
  std::string media_type;        // how the server encoded it (ListPageCached)
};

class ApiClient {
 public:
  explicit ApiClient(std::shared_ptr<RestClient> rest);

  // `ns` is ignored for cluster-scoped resources; empty `ns` on List/Watch
  // means all namespaces.
  Result<nlohmann::json> Get(const ResourceType& type, std::string_view ns, std::string_view name,
                             std::string_view subresource = {});
  // One page (honours options.limit and options.continue_token).
  Result<ObjectList> ListPage(const ResourceType& type, std::string_view ns,
                              const ListOptions& options);
  // One page, handing each item to `on_item` as it is decoded from the
  // response while it arrives; the whole response is never held. The
  // returned list carries the version and continue token, no items.
  // `stop` abandons the request wherever it is (throttled, waiting for the
  // server, reading the body), as for ListPageCached and Watch.
  Result<ObjectList> ListPageStreaming(const ResourceType& type, std::string_view ns,
                                       const ListOptions& options,
                                       const std::function<void(nlohmann::json item)>& on_item,
                                       std::stop_token stop = {});
  // Like ListPageStreaming, with items handed over as cache objects. With
  // kProtobufForBuiltIns, built-in types are asked for in Kubernetes' protobuf
  // encoding first (as client-go's typed clients do), which the API server
  // encodes and this client decodes several times faster than JSON; custom
  // resources, and servers that answer JSON, are read as JSON.
  Result<ObjectList> ListPageCached(const ResourceType& type, std::string_view ns,
                                    const ListOptions& options, ListEncoding encoding,
                                    const std::function<void(CachedObject object)>& on_object,
                                    std::stop_token stop = {});
  // All pages, following continue tokens; the result's resource_version is the
  // first page's (a paginated list is one consistent snapshot). A 410 here
  // means the snapshot expired mid-way: list again.
  Result<ObjectList> List(const ResourceType& type, std::string_view ns, ListOptions options = {});

  Result<nlohmann::json> Create(const ResourceType& type, std::string_view ns,
                                const nlohmann::json& object);
  // POST to a subresource of an existing object, e.g. a TokenRequest to
  // serviceaccounts/{name}/token or an Eviction to pods/{name}/eviction; returns what
  // the server answers (for a TokenRequest, the request with its status filled in).
  Result<nlohmann::json> CreateSubresource(const ResourceType& type, std::string_view ns,
                                           std::string_view name, std::string_view subresource,
                                           const nlohmann::json& body);
  // PUT of the whole object. Carries metadata.resourceVersion, so a stale
  // object fails with kConflict (optimistic concurrency).
  Result<nlohmann::json> Update(const ResourceType& type, std::string_view ns,
                                const nlohmann::json& object);
  // PUT of the status subresource: spec changes in `object` are ignored.
  Result<nlohmann::json> UpdateStatus(const ResourceType& type, std::string_view ns,
                                      const nlohmann::json& object);
  Result<nlohmann::json> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                               PatchType patch_type, const nlohmann::json& patch,
                               const PatchOptions& options = {});
  // Server-side apply of `object` (which must carry apiVersion, kind and
  // metadata.name) as `field_manager`.
  Result<nlohmann::json> Apply(const ResourceType& type, std::string_view ns,
                               const nlohmann::json& object, std::string_view field_manager,
                               bool force = false, std::string_view subresource = {});
  Status Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});

  // Opens a watch. Set options.resource_version to where to start (from a
  // list); allow_watch_bookmarks and timeout_seconds as wanted.
  // `stop` abandons the request, and later cancels the stream's reads.
  Result<std::unique_ptr<WatchStream>> Watch(const ResourceType& type, std::string_view ns,
                                             const ListOptions& options, std::stop_token stop = {});

  RestClient& rest() { return *rest_; }

 private:
  Result<nlohmann::json> Write(std::string_view method, const std::string& path,
                               const nlohmann::json& body, std::string_view content_type);

  std::shared_ptr<RestClient> rest_;
};

}  // namespace fulcrum::kube
