#include "operator/kube/client/api_client.h"

#include "operator/kube/protobuf/k8s_schema.h"
#include "operator/kube/protobuf/list_decoder.h"
#include "operator/kube/watch/list_stream_decoder.h"

namespace fulcrum::kube {
namespace {

// The namespace a request for `object` goes to: the argument, else its own.
std::string TargetNamespace(std::string_view ns, const nlohmann::json& object) {
  return ns.empty() ? NamespaceOf(object) : std::string(ns);
}

Error MissingName(const char* verb) {
  return InvalidArgument("metadata.name",
                         std::string(verb) + " needs an object with metadata.name");
}

}  // namespace

ApiClient::ApiClient(std::shared_ptr<RestClient> rest) : rest_(std::move(rest)) {}

Result<nlohmann::json> ApiClient::Write(std::string_view method, const std::string& path,
                                        const nlohmann::json& body, std::string_view content_type) {
  return rest_->Send(method, path, body, content_type);
}

Result<nlohmann::json> ApiClient::Get(const ResourceType& type, std::string_view ns,
                                      std::string_view name, std::string_view subresource) {
  return rest_->Get(ObjectPath(type, ns, name, subresource));
}

Result<ObjectList> ApiClient::ListPage(const ResourceType& type, std::string_view ns,
                                       const ListOptions& options) {
  auto body = rest_->Get(CollectionPath(type, ns) + options.ToQuery());
  if (!body.ok()) return body.error();
  ObjectList list;
  if (auto items = body->find("items"); items != body->end() && items->is_array()) {
    list.items.reserve(items->size());
    for (auto& item : *items) list.items.push_back(std::move(item));
  }
  if (auto metadata = body->find("metadata"); metadata != body->end() && metadata->is_object()) {
    // A field of the wrong type reads as absent instead of throwing.
    const auto text = [&](const char* key) {
      const auto field = metadata->find(key);
      return field != metadata->end() && field->is_string() ? field->get<std::string>() : "";
    };
    list.resource_version = text("resourceVersion");
    list.continue_token = text("continue");
  }
  return list;
}

namespace {
// Lists are read in bulk: up to 1 MiB at a time, waking up once 256 KiB have arrived.
constexpr std::size_t kListReadSize = 1024 * 1024;
constexpr std::size_t kListWakeUpSize = 256 * 1024;
}  // namespace

namespace {
// Reads a JSON list response as it arrives, handing over each item.
Result<ObjectList> ReadJsonList(ResponseStream& body, const std::string& path,
                                const std::function<void(nlohmann::json item)>& on_item) {
  ObjectList list;
  bool bad_item = false;
  ListStreamDecoder decoder(
      [&](std::string_view text) {
        nlohmann::json item = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (item.is_discarded()) {
          bad_item = true;
          return;
        }
        on_item(std::move(item));
      },
      [&](std::string_view text) {
        const nlohmann::json metadata = nlohmann::json::parse(text, nullptr, false);
        list.resource_version = StringField(metadata, "resourceVersion");
        list.continue_token = StringField(metadata, "continue");
      });
  while (true) {
    auto bytes = body.ReadSome(kListReadSize, kListWakeUpSize);
    if (!bytes.ok()) return bytes.error();
    if (bytes->empty()) break;
    decoder.Feed(*bytes);
    if (bad_item)
      return MakeError(ErrorCode::kInternal, "GET " + path + ": an item is not valid JSON");
  }
  if (!decoder.complete()) {
    return MakeError(ErrorCode::kUnavailable, "GET " + path + ": the list response ended early");
  }
  return list;
}

// Reads a protobuf list response, decoding items while the rest is still arriving.
Result<ObjectList> ReadProtobufList(ResponseStream& body, const std::string& path,
                                    const std::function<void(CachedObject object)>& on_object) {
  protobuf::ListDecoder decoder(protobuf::K8sSchema::BuiltIn(), on_object);
  auto failed = [&](const Error& error) {
    return MakeError(error.code, "GET " + path + ": " + error.message);
  };
  while (true) {
    auto bytes = body.ReadSome(kListReadSize, kListWakeUpSize);
    if (!bytes.ok()) return bytes.error();
    if (bytes->empty()) break;
    if (Status status = decoder.Feed(*bytes); !status.ok()) return failed(status.error());
  }
  auto list = decoder.Finish();
  if (!list.ok()) return failed(list.error());
  ObjectList result;
  result.resource_version = std::move(list->resource_version);
  result.continue_token = std::move(list->continue_token);
  return result;
}
}  // namespace

Result<ObjectList> ApiClient::ListPageStreaming(
    const ResourceType& type, std::string_view ns, const ListOptions& options,
    const std::function<void(nlohmann::json item)>& on_item, std::stop_token stop) {
  HttpRequest request;
  request.path = CollectionPath(type, ns) + options.ToQuery();
  request.compressed = true;
  request.stop = std::move(stop);
  auto body = rest_->Stream(request);
  if (!body.ok()) return body.error();
  return ReadJsonList(**body, request.path, on_item);
}

Result<ObjectList> ApiClient::ListPageCached(
    const ResourceType& type, std::string_view ns, const ListOptions& options,
    ListEncoding encoding, const std::function<void(CachedObject object)>& on_object,
    std::stop_token stop) {
  HttpRequest request;
  request.path = CollectionPath(type, ns) + options.ToQuery();
  request.compressed = true;
  request.stop = std::move(stop);
  if (encoding == ListEncoding::kProtobufForBuiltIns &&
      protobuf::K8sSchema::BuiltIn().HasGroupVersion(type.group, type.version)) {
    request.accept = std::string(protobuf::kProtobufMediaType) + ", application/json";
  }
  auto body = rest_->Stream(request);
  if (!body.ok()) return body.error();
  const std::string media_type = (*body)->media_type();
  auto list = media_type == protobuf::kProtobufMediaType
                  ? ReadProtobufList(**body, request.path, on_object)
                  : ReadJsonList(**body, request.path, [&](nlohmann::json item) {
                      on_object(CachedObject::FromJson(item));
                    });
  if (list.ok()) list->media_type = media_type;
  return list;
}

Result<ObjectList> ApiClient::List(const ResourceType& type, std::string_view ns,
                                   ListOptions options) {
  ObjectList all;
  bool first = true;
  do {
    auto page = ListPage(type, ns, options);
    if (!page.ok()) return page.error();
    if (first) all.resource_version = page->resource_version;
    first = false;
    all.items.insert(all.items.end(), std::make_move_iterator(page->items.begin()),
                     std::make_move_iterator(page->items.end()));
    options.continue_token = page->continue_token;
    // A continued list is served from the first page's snapshot; the version
    // must not be repeated alongside the token.
    options.resource_version.clear();
    options.resource_version_match.clear();
  } while (!options.continue_token.empty());
  return all;
}

Result<nlohmann::json> ApiClient::Create(const ResourceType& type, std::string_view ns,
                                         const nlohmann::json& object) {
  return Write("POST", CollectionPath(type, TargetNamespace(ns, object)), object,
               "application/json");
}

Result<nlohmann::json> ApiClient::CreateSubresource(const ResourceType& type, std::string_view ns,
                                                    std::string_view name,
                                                    std::string_view subresource,
                                                    const nlohmann::json& body) {
  return Write("POST", ObjectPath(type, ns, name, subresource), body, "application/json");
}

Result<nlohmann::json> ApiClient::Update(const ResourceType& type, std::string_view ns,
                                         const nlohmann::json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return MissingName("update");
  return Write("PUT", ObjectPath(type, TargetNamespace(ns, object), name), object,
               "application/json");
}

Result<nlohmann::json> ApiClient::UpdateStatus(const ResourceType& type, std::string_view ns,
                                               const nlohmann::json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return MissingName("update status");
  return Write("PUT", ObjectPath(type, TargetNamespace(ns, object), name, "status"), object,
               "application/json");
}

Result<nlohmann::json> ApiClient::Patch(const ResourceType& type, std::string_view ns,
                                        std::string_view name, PatchType patch_type,
                                        const nlohmann::json& patch, const PatchOptions& options) {
  if (patch_type == PatchType::kApply && options.field_manager.empty()) {
    return InvalidArgument("fieldManager", "server-side apply needs a field manager");
  }
  std::string path = ObjectPath(type, ns, name, options.subresource);
  std::string query;
  auto add = [&query](const std::string& key_value) {
    query += (query.empty() ? "?" : "&") + key_value;
  };
  if (!options.field_manager.empty()) add("fieldManager=" + UrlEncode(options.field_manager));
  if (options.force) add("force=true");
  if (options.dry_run) add("dryRun=All");
  return Write("PATCH", path + query, patch, ContentType(patch_type));
}

Result<nlohmann::json> ApiClient::Apply(const ResourceType& type, std::string_view ns,
                                        const nlohmann::json& object,
                                        std::string_view field_manager, bool force,
                                        std::string_view subresource) {
  const std::string name = NameOf(object);
  if (name.empty()) return MissingName("apply");
  PatchOptions options;
  options.field_manager = std::string(field_manager);
  options.force = force;
  options.subresource = std::string(subresource);
  return Patch(type, TargetNamespace(ns, object), name, PatchType::kApply, object, options);
}

Status ApiClient::Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                         const DeleteOptions& options) {
  auto result = Write("DELETE", ObjectPath(type, ns, name), options.ToBody(), "application/json");
  if (!result.ok()) return result.error();
  return Ok();
}

Result<std::unique_ptr<WatchStream>> ApiClient::Watch(const ResourceType& type, std::string_view ns,
                                                      const ListOptions& options,
                                                      std::stop_token stop) {
  ListOptions watch_options = options;
  watch_options.limit = 0;
  watch_options.continue_token.clear();
  HttpRequest request;
  request.path = CollectionPath(type, ns) + watch_options.ToQuery(/*watch=*/true);
  request.stop = std::move(stop);
  auto body = rest_->Stream(request);
  if (!body.ok()) return body.error();
  return std::make_unique<WatchStream>(std::move(body).value(), "watch " + request.path);
}

}  // namespace fulcrum::kube
