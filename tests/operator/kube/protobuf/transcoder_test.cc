// Built-in objects in protobuf become the JSON the API server would send: names, Time and
// MicroTime, Quantity, IntOrString, bytes, maps, FieldsV1, and Go's inlined fields.
#include "operator/kube/protobuf/transcoder.h"

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fulcrum::kube::protobuf {
namespace {

// `text` (protobuf text format) as `api_version`/`kind`, serialized, then transcoded.
nlohmann::json Transcode(const std::string& api_version, const std::string& kind,
                         const std::string& text) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const google::protobuf::Descriptor* type = schema.Find(api_version, kind);
  EXPECT_NE(type, nullptr) << api_version << " " << kind;
  if (type == nullptr) return nullptr;
  google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> message(factory.GetPrototype(type)->New());
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, message.get())) << text;
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  const Status status = TranscodeMessage(schema, *type, message->SerializeAsString(), out);
  EXPECT_TRUE(status.ok()) << status.error().ToString();
  return nlohmann::json::from_msgpack(bytes);
}

TEST(Transcoder, PodBecomesItsJsonForm) {
  const nlohmann::json pod = Transcode("v1", "Pod", R"pb(
    metadata {
      name: "trainer-0"
      namespace: "jobs"
      uid: "u-1"
      resourceVersion: "42"
      creationTimestamp { seconds: 1795305600 }
      labels { key: "app" value: "fulcrum" }
      labels { key: "rank" value: "0" }
      ownerReferences {
        apiVersion: "fulcrum.dev/v1alpha1"
        kind: "HeteroTrainingJob"
        name: "j"
        uid: "o-1"
        controller: true
      }
      managedFields {
        manager: "fulcrum"
        operation: "Update"
        fieldsType: "FieldsV1"
        fieldsV1 { Raw: "{\"f:metadata\":{\"f:labels\":{\".\":{},\"k:{\\\"a\\\":1}\":{}}}}" }
        time {}
      }
    }
    spec {
      containers {
        name: "main"
        image: "fulcrum-trainer:dev"
        ports { containerPort: 29500 protocol: "TCP" }
        resources {
          requests {
            key: "cpu"
            value { string: "500m" }
          }
          limits {
            key: "nvidia.com/gpu"
            value { string: "1" }
          }
        }
        livenessProbe {
          handler {
            httpGet {
              path: "/healthz"
              port { type: 1 strVal: "metrics" }
            }
          }
          periodSeconds: 10
        }
        readinessProbe { handler { tcpSocket { port { type: 0 intVal: 8080 } } } }
        env {
          name: "TOKEN"
          valueFrom {
            secretKeyRef {
              localObjectReference { name: "job-token" }
              key: "token"
            }
          }
        }
      }
      volumes {
        name: "data"
        volumeSource { emptyDir { sizeLimit { string: "1Gi" } } }
      }
      terminationGracePeriodSeconds: 30
    }
    status {
      phase: "Running"
      conditions {
        type: "Ready"
        status: "True"
        lastProbeTime {}
        lastTransitionTime { seconds: 0 }
      }
    }
  )pb");
  const nlohmann::json& metadata = pod["metadata"];
  EXPECT_EQ(metadata["name"], "trainer-0");
  EXPECT_EQ(metadata["creationTimestamp"], "2026-11-22T00:00:00Z");
  EXPECT_EQ(metadata["labels"], (nlohmann::json{{"app", "fulcrum"}, {"rank", "0"}}));
  EXPECT_EQ(metadata["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(metadata["managedFields"][0]["fieldsV1"],
            nlohmann::json::parse(R"({"f:metadata":{"f:labels":{".":{},"k:{\"a\":1}":{}}}})"));
  EXPECT_TRUE(metadata["managedFields"][0]["time"].is_null()) << "the zero time is null";
  const nlohmann::json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["ports"][0]["containerPort"], 29500);
  EXPECT_EQ(container["resources"]["requests"]["cpu"], "500m");
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"], "1");
  // Probe embeds ProbeHandler inline: httpGet sits in the probe itself, not under "handler".
  EXPECT_FALSE(container["livenessProbe"].contains("handler"));
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["port"], "metrics");
  EXPECT_EQ(container["livenessProbe"]["periodSeconds"], 10);
  EXPECT_EQ(container["readinessProbe"]["tcpSocket"]["port"], 8080);
  EXPECT_EQ(container["env"][0]["valueFrom"]["secretKeyRef"],
            (nlohmann::json{{"name", "job-token"}, {"key", "token"}}));
  EXPECT_EQ(pod["spec"]["volumes"][0],
            (nlohmann::json{{"name", "data"}, {"emptyDir", {{"sizeLimit", "1Gi"}}}}));
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(pod["status"]["conditions"][0]["lastTransitionTime"], "1970-01-01T00:00:00Z");
  EXPECT_TRUE(pod["status"]["conditions"][0]["lastProbeTime"].is_null());
}

TEST(Transcoder, BytesAreBase64AndMicroTimeHasMicroseconds) {
  const nlohmann::json config_map = Transcode("v1", "ConfigMap", R"pb(
    metadata { name: "c" }
    data { key: "a" value: "text" }
    binaryData { key: "b" value: "\x00\xff\x10hi" }
  )pb");
  EXPECT_EQ(config_map["data"]["a"], "text");
  EXPECT_EQ(config_map["binaryData"]["b"], "AP8QaGk=");
  const nlohmann::json lease = Transcode("coordination.k8s.io/v1", "Lease", R"pb(
    metadata { name: "l" }
    spec {
      holderIdentity: "op-1"
      leaseDurationSeconds: 15
      renewTime { seconds: 1795305600 nanos: 123456789 }
    }
  )pb");
  EXPECT_EQ(lease["spec"]["renewTime"], "2026-11-22T00:00:00.123456Z");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST(Transcoder, MalformedInputIsAnErrorNamingTheType) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  // metadata (field 1) claims 50 bytes but has 2.
  const Status status =
      TranscodeMessage(schema, *schema.Find("v1", "Pod"), std::string("\x0a\x32\x0a\x00", 4), out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("k8s.io.api.core.v1.Pod"), std::string::npos)
      << status.error().message;
}

// A Pod whose name and FieldsV1 carry bytes that are not UTF-8 (the wire does not check
// proto2 strings) still becomes JSON that can be written out: found by transcoder_fuzz.
TEST(Transcoder, InvalidUtf8StillWritesOutAsJson) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const google::protobuf::Descriptor* pod = schema.Find("v1", "Pod");
  ASSERT_NE(pod, nullptr);
  // Pod.metadata(1) { name(1): "a\xffb", managedFields(17) { fieldsV1(7) { Raw(1): ... } } }
  const std::string fields = "{\"f:\xa1\":{}}";
  const std::string raw = std::string("\x0a") + static_cast<char>(fields.size()) + fields;
  const std::string entry = std::string("\x3a") + static_cast<char>(raw.size()) + raw;
  const std::string meta = std::string(
                               "\x0a\x03"
                               "a\xff"
                               "b\x8a\x01",
                               7) +
                           static_cast<char>(entry.size()) + entry;
  const std::string wire = std::string("\x0a") + static_cast<char>(meta.size()) + meta;
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  const Status status = TranscodeMessage(schema, *pod, wire, out);
  ASSERT_TRUE(status.ok()) << status.error().ToString();
  const nlohmann::json json = nlohmann::json::from_msgpack(bytes);
  EXPECT_EQ(json["metadata"]["name"],
            "a\xef\xbf\xbd"
            "b");
  // Not JSON (not UTF-8): kept as the base64 of its bytes, as for any non-JSON FieldsV1.
  EXPECT_TRUE(json["metadata"]["managedFields"][0]["fieldsV1"].is_string());
  EXPECT_NO_THROW((void)json.dump());
}

// A singular field written twice in a row was counted as one key but written as two, so the
// MessagePack did not decode (found by transcoder_fuzz and list_decoder_fuzz). The API
// server never writes one twice: it is refused, by the check and the transcoder alike.
TEST(Transcoder, ASingularFieldWrittenTwiceIsMalformed) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const google::protobuf::Descriptor* lease = schema.Find("coordination.k8s.io/v1", "Lease");
  ASSERT_NE(lease, nullptr);
  // Lease.spec(2) { leaseDurationSeconds(2): 15, leaseDurationSeconds(2): 30 }
  const std::string twice("\x12\x04\x10\x0f\x10\x1e", 6);
  // Pod.metadata(1) twice: a message field, which protobuf would merge.
  const std::string metadata_twice("\x0a\x03\x0a\x01\x61\x0a\x03\x0a\x01\x62", 10);
  const google::protobuf::Descriptor* pod = schema.Find("v1", "Pod");
  for (const auto& [type, wire] : {std::pair{lease, twice}, std::pair{pod, metadata_twice}}) {
    std::vector<std::uint8_t> bytes;
    MsgpackWriter out(bytes);
    const Status transcoded = TranscodeMessage(schema, *type, wire, out);
    ASSERT_FALSE(transcoded.ok()) << type->full_name();
    EXPECT_NE(transcoded.error().message.find("appears more than once"), std::string::npos)
        << transcoded.error().message;
    EXPECT_FALSE(CheckTranscodable(schema, *type, wire).ok()) << type->full_name();
  }
  // Once is fine.
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  ASSERT_TRUE(TranscodeMessage(schema, *lease, std::string("\x12\x02\x10\x0f", 4), out).ok());
  EXPECT_EQ(nlohmann::json::from_msgpack(bytes)["spec"]["leaseDurationSeconds"], 15);
}

// A field unknown to the schema between two elements of a repeated field: counted as one key,
// written as two, so the MessagePack did not decode (list_decoder_fuzz). Go never writes that;
// it is refused like any other interrupted repeated field. Between two fields it is skipped.
TEST(Transcoder, AnUnknownFieldInsideARepeatedFieldIsMalformed) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const google::protobuf::Descriptor* pod = schema.Find("v1", "Pod");
  ASSERT_NE(pod, nullptr);
  const std::string unknown("\xb8\x3e\x01", 3);  // field 999, varint 1
  // Pod.metadata(1) { finalizers(14): "a", <999>, finalizers(14): "b" }
  const std::string interrupted = "\x0a\x09\x72\x01\x61" + unknown + "\x72\x01\x62";
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  EXPECT_FALSE(TranscodeMessage(schema, *pod, interrupted, out).ok());
  EXPECT_FALSE(CheckTranscodable(schema, *pod, interrupted).ok());
  // Pod.metadata(1) { name(1): "p", <999>, finalizers(14): "a", finalizers(14): "b" }
  const std::string between = "\x0a\x0c\x0a\x01\x70" + unknown + "\x72\x01\x61\x72\x01\x62";
  bytes.clear();
  ASSERT_TRUE(TranscodeMessage(schema, *pod, between, out).ok());
  const nlohmann::json json = nlohmann::json::from_msgpack(bytes);
  EXPECT_EQ(json["metadata"]["name"], "p");
  EXPECT_EQ(json["metadata"]["finalizers"], (nlohmann::json{"a", "b"}));
}

// Special types (Time, Quantity...) and map entries are read leniently, the last value of a
// field winning; the check refused them once it refused repeated singular fields, so the two
// disagreed on such objects (transcoder_fuzz). They agree now, and the output decodes.
TEST(Transcoder, CheckAgreesWithTheTranscoderOnTimesAndMapEntries) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const google::protobuf::Descriptor* pod = schema.Find("v1", "Pod");
  ASSERT_NE(pod, nullptr);
  // metadata(1) { creationTimestamp(8) { seconds(1): 1, seconds(1): 2 } }
  const std::string time_twice("\x0a\x06\x42\x04\x08\x01\x08\x02", 8);
  // metadata(1) { labels(11) { key(1): "a", key(1): "b", value(2): "v" } }
  const std::string key_twice("\x0a\x0b\x5a\x09\x0a\x01\x61\x0a\x01\x62\x12\x01\x76", 13);
  for (const std::string& wire : {time_twice, key_twice}) {
    std::vector<std::uint8_t> bytes;
    MsgpackWriter out(bytes);
    const Status transcoded = TranscodeMessage(schema, *pod, wire, out);
    EXPECT_EQ(CheckTranscodable(schema, *pod, wire).ok(), transcoded.ok());
    ASSERT_TRUE(transcoded.ok()) << transcoded.error().ToString();
    EXPECT_NO_THROW((void)nlohmann::json::from_msgpack(bytes).dump());
  }
}

TEST(Transcoder, DurationsFormatAsGoDoes) {  // times: tests/common/rfc3339_test.cc
  EXPECT_EQ(GoDurationText(0), "0s");
  EXPECT_EQ(GoDurationText(1), "1ns");
  EXPECT_EQ(GoDurationText(1500), "1.5\u00b5s");
  EXPECT_EQ(GoDurationText(300'000'000), "300ms");
  EXPECT_EQ(GoDurationText(1'500'000'000), "1.5s");
  EXPECT_EQ(GoDurationText(90'000'000'000), "1m30s");
  EXPECT_EQ(GoDurationText(3'600'000'000'000), "1h0m0s");
  EXPECT_EQ(GoDurationText(-61'000'000'000), "-1m1s");
}

}  // namespace
}  // namespace fulcrum::kube::protobuf
