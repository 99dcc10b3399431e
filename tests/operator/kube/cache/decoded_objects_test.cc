#include "operator/kube/cache/decoded_objects.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace fulcrum::kube {
namespace {

CachedObject Object(const std::string& uid, const std::string& version, const std::string& value) {
  return CachedObject::FromJson({{"metadata",
                                  {{"namespace", "default"},
                                   {"name", "object-" + uid},
                                   {"uid", uid},
                                   {"resourceVersion", version}}},
                                 {"data", {{"value", value}}}});
}

std::string ReadValue(const nlohmann::json& object) {
  return object["data"].value("value", "");
}

TEST(DecodedObjects, ReturnsEachObjectsValueInTheGivenOrder) {
  DecodedObjects<std::string> values;
  EXPECT_EQ(values.Values({Object("b", "1", "two"), Object("a", "1", "one")}, ReadValue),
            (std::vector<std::string>{"two", "one"}));
}

TEST(DecodedObjects, DecodesAnObjectAgainOnlyWhenItsResourceVersionChanged) {
  DecodedObjects<std::string> values;
  (void)values.Values({Object("a", "1", "one"), Object("b", "1", "two")}, ReadValue);
  EXPECT_EQ(values.decoded(), 2U);
  EXPECT_EQ(values.Values({Object("a", "1", "one"), Object("b", "1", "two")}, ReadValue),
            (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(values.decoded(), 2U);
  EXPECT_EQ(values.Values({Object("a", "1", "one"), Object("b", "2", "three")}, ReadValue),
            (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(values.decoded(), 3U);
}

TEST(DecodedObjects, ForgetsObjectsMissingFromTheLastCall) {
  DecodedObjects<std::string> values;
  (void)values.Values({Object("a", "1", "one")}, ReadValue);
  (void)values.Values({}, ReadValue);
  // Seen again after it was left out: decoded again, not served from a stale entry.
  (void)values.Values({Object("a", "1", "one")}, ReadValue);
  EXPECT_EQ(values.decoded(), 2U);
}

}  // namespace
}  // namespace fulcrum::kube
