#include "operator/controller/job_writer.h"

#include "common/log.h"

namespace fulcrum::controller {

kube::ResourceType HeteroTrainingJobs() {
  return {"fulcrum.dev", "v1alpha1", "heterotrainingjobs", true};
}

ApiJobWriter::ApiJobWriter(std::shared_ptr<kube::ApiClient> client, kube::EventRecorder* events)
    : client_(std::move(client)), events_(events) {}

Result<nlohmann::json> ApiJobWriter::Create(const kube::ResourceType& type, const std::string& ns,
                                            const nlohmann::json& object) {
  return client_->Create(type, ns, object);
}

Result<nlohmann::json> ApiJobWriter::Get(const kube::ResourceType& type, const std::string& ns,
                                         const std::string& name) {
  return client_->Get(type, ns, name);
}

Result<nlohmann::json> ApiJobWriter::Patch(const kube::ResourceType& type, const std::string& ns,
                                           const std::string& name, const nlohmann::json& patch) {
  return client_->Patch(type, ns, name, kube::PatchType::kMerge, patch);
}

Result<nlohmann::json> ApiJobWriter::PatchStatus(const kube::ResourceType& type,
                                                 const std::string& ns, const std::string& name,
                                                 const nlohmann::json& patch) {
  return client_->Patch(type, ns, name, kube::PatchType::kMerge, patch, kube::StatusPatchOptions());
}

Status ApiJobWriter::Delete(const kube::ResourceType& type, const std::string& ns,
                            const std::string& name, const kube::DeleteOptions& options) {
  return client_->Delete(type, ns, name, options);
}

void ApiJobWriter::Event(const nlohmann::json& regarding, const EventNote& note) {
  log::Info(
      "controller",
      regarding["metadata"].value("namespace", "") + "/" + regarding["metadata"].value("name", ""),
      note.note, {{"reason", note.reason}});
  if (events_ == nullptr) return;
  events_->Record(regarding, note.warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                  note.reason, note.action, note.note);
}

}  // namespace fulcrum::controller
