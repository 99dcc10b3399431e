// Every write the job reconciler makes: objects created, merge patches of a job and of its
// status, deletions, and Events. ApiJobWriter sends them to the API server (and Events to the
// recorder); a reconciler unit test records them instead, the way controller-runtime tests a
// reconciler against its fake client, and asserts on what was written.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "operator/controller/job_events.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/events/event_recorder.h"

namespace fulcrum::controller {

// The custom resource the reconciler writes: fulcrum.dev/v1alpha1 heterotrainingjobs.
kube::ResourceType HeteroTrainingJobs();

class JobWriter {
 public:
  virtual ~JobWriter() = default;

  virtual Result<nlohmann::json> Create(const kube::ResourceType& type, const std::string& ns,
                                        const nlohmann::json& object) = 0;
  // A read, for the one object the reconciler must see before its cache does: a token Secret
  // another writer created a moment ago.
  virtual Result<nlohmann::json> Get(const kube::ResourceType& type, const std::string& ns,
                                     const std::string& name) = 0;
  // A JSON merge patch of the object, or of its status subresource.
  virtual Result<nlohmann::json> Patch(const kube::ResourceType& type, const std::string& ns,
                                       const std::string& name, const nlohmann::json& patch) = 0;
  virtual Result<nlohmann::json> PatchStatus(const kube::ResourceType& type, const std::string& ns,
                                             const std::string& name,
                                             const nlohmann::json& patch) = 0;
  virtual Status Delete(const kube::ResourceType& type, const std::string& ns,
                        const std::string& name, const kube::DeleteOptions& options) = 0;
  // Logged as a JSON line too; never blocks on the API server.
  virtual void Event(const nlohmann::json& regarding, const EventNote& note) = 0;
};

class ApiJobWriter final : public JobWriter {
 public:
  // `events` may be null (no Events, only their log lines).
  ApiJobWriter(std::shared_ptr<kube::ApiClient> client, kube::EventRecorder* events);

  Result<nlohmann::json> Create(const kube::ResourceType& type, const std::string& ns,
                                const nlohmann::json& object) override;
  Result<nlohmann::json> Get(const kube::ResourceType& type, const std::string& ns,
                             const std::string& name) override;
  Result<nlohmann::json> Patch(const kube::ResourceType& type, const std::string& ns,
                               const std::string& name, const nlohmann::json& patch) override;
  Result<nlohmann::json> PatchStatus(const kube::ResourceType& type, const std::string& ns,
                                     const std::string& name, const nlohmann::json& patch) override;
  Status Delete(const kube::ResourceType& type, const std::string& ns, const std::string& name,
                const kube::DeleteOptions& options) override;
  void Event(const nlohmann::json& regarding, const EventNote& note) override;

 private:
  std::shared_ptr<kube::ApiClient> client_;
  kube::EventRecorder* events_;
};

}  // namespace fulcrum::controller
