// A protobuf list response decodes the same however it is cut into pieces, and a cut-short,
// foreign or unknown response is an error, never a partial list passed off as whole.
#include "operator/kube/protobuf/list_decoder.h"

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fulcrum::kube::protobuf {
namespace {

std::string Serialized(const std::string& api_version, const std::string& kind,
                       const std::string& text) {
  const google::protobuf::Descriptor* type = K8sSchema::BuiltIn().Find(api_version, kind);
  google::protobuf::DynamicMessageFactory factory;
  std::unique_ptr<google::protobuf::Message> message(factory.GetPrototype(type)->New());
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, message.get()));
  return message->SerializeAsString();
}

// "k8s\0" + runtime.Unknown{typeMeta, raw}.
std::string Envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  auto length_delimited = [](int number, const std::string& payload) {
    std::string field(1, static_cast<char>(number << 3 | 2));
    std::size_t size = payload.size();
    do {
      field.push_back(static_cast<char>((size & 0x7f) | (size > 0x7f ? 0x80 : 0)));
      size >>= 7;
    } while (size > 0);
    return field + payload;
  };
  const std::string type_meta = length_delimited(1, api_version) + length_delimited(2, kind);
  return std::string("k8s\0", 4) + length_delimited(1, type_meta) + length_delimited(2, raw) +
         length_delimited(4, "application/vnd.kubernetes.protobuf");
}

std::string PodList(int pods) {
  std::string text = R"pb(metadata { resourceVersion: "777" continue: "next-page" })pb";
  for (int i = 0; i < pods; ++i) {
    text += " items { metadata { name: \"p" + std::to_string(i) + "\" namespace: \"ns\" uid: \"u" +
            std::to_string(i) + "\" resourceVersion: \"" + std::to_string(100 + i) +
            "\" labels { key: \"app\" value: \"x\" } ownerReferences { uid: \"owner\" } }"
            " spec { nodeName: \"a100-0\" } }";
  }
  return Envelope("v1", "PodList", Serialized("v1", "PodList", text));
}

TEST(ListDecoder, ByteByByteEqualsAllAtOnce) {
  const std::string body = PodList(3);
  std::vector<CachedObject> whole;
  auto list = DecodeList(K8sSchema::BuiltIn(), body, [&](CachedObject o) { whole.push_back(o); });
  ASSERT_TRUE(list.ok()) << list.error().ToString();
  EXPECT_EQ(list->kind, "PodList");
  EXPECT_EQ(list->resource_version, "777");
  EXPECT_EQ(list->continue_token, "next-page");
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[1].key(), "ns/p1");
  EXPECT_EQ(whole[1].uid(), "u1");
  EXPECT_EQ(whole[1].resource_version(), "101");
  EXPECT_EQ(whole[1].labels().at(0), (std::pair<std::string, std::string>{"app", "x"}));
  EXPECT_EQ(whole[1].owner_uids(), std::vector<std::string>{"owner"});
  EXPECT_EQ(whole[1].ToJson()["spec"]["nodeName"], "a100-0");

  std::vector<CachedObject> pieces;
  ListDecoder decoder(K8sSchema::BuiltIn(), [&](CachedObject o) { pieces.push_back(o); });
  for (char byte : body) ASSERT_TRUE(decoder.Feed(std::string_view(&byte, 1)).ok());
  auto finished = decoder.Finish();
  ASSERT_TRUE(finished.ok()) << finished.error().ToString();
  ASSERT_EQ(pieces.size(), whole.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ(pieces[i].ToJson(), whole[i].ToJson());
}

TEST(ListDecoder, AResponseCutShortIsAnError) {
  const std::string body = PodList(2);
  for (std::size_t cut : {std::size_t{2}, std::size_t{10}, body.size() / 2, body.size() - 40}) {
    auto list = DecodeList(K8sSchema::BuiltIn(), body.substr(0, cut), [](CachedObject) {});
    EXPECT_FALSE(list.ok()) << "cut at " << cut;
    if (!list.ok()) {
      EXPECT_NE(list.error().message.find("ended early"), std::string::npos)
          << list.error().message;
    }
  }
}

TEST(ListDecoder, ForeignOrUnknownBodiesAreRefusedByName) {
  auto json = DecodeList(K8sSchema::BuiltIn(), R"({"kind":"PodList"})", [](CachedObject) {});
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.error().message.find("magic"), std::string::npos);
  auto unknown = DecodeList(K8sSchema::BuiltIn(),
                            Envelope("fulcrum.dev/v1alpha1", "HeteroTrainingJobList", ""),
                            [](CachedObject) {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("HeteroTrainingJobList"), std::string::npos);
  auto not_a_list =
      DecodeList(K8sSchema::BuiltIn(), Envelope("v1", "Pod", ""), [](CachedObject) {});
  ASSERT_FALSE(not_a_list.ok());
  EXPECT_NE(not_a_list.error().message.find("not a list"), std::string::npos);
}

TEST(ListDecoder, AnItemThatWouldNotDecodeFailsTheListNotALaterRead) {
  // Items are kept as protobuf and decoded when read, so the list checks them up front: here
  // a Pod whose spec (field 2) arrives as a number instead of a message.
  const std::string raw("\x12\x02\x10\x01", 4);
  auto list = DecodeList(K8sSchema::BuiltIn(), Envelope("v1", "PodList", raw), [](CachedObject) {});
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.error().message.find("wrong wire type for spec"), std::string::npos)
      << list.error().message;
}

TEST(K8sSchema, KnowsBuiltInGroupsAndNotCustomResources) {
  const K8sSchema& schema = K8sSchema::BuiltIn();
  EXPECT_TRUE(schema.HasGroupVersion("", "v1"));
  EXPECT_TRUE(schema.HasGroupVersion("apps", "v1"));
  EXPECT_TRUE(schema.HasGroupVersion("coordination.k8s.io", "v1"));
  EXPECT_TRUE(schema.HasGroupVersion("events.k8s.io", "v1"));
  EXPECT_FALSE(schema.HasGroupVersion("fulcrum.dev", "v1alpha1"));
  EXPECT_FALSE(schema.HasGroupVersion("apps", "v9"));
  EXPECT_NE(schema.Find("rbac.authorization.k8s.io/v1", "RoleList"), nullptr);
  EXPECT_EQ(schema.Find("fulcrum.dev/v1alpha1", "HeteroTrainingJob"), nullptr);
}

}  // namespace
}  // namespace fulcrum::kube::protobuf
