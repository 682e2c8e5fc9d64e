// Schema options beyond Python's, on classes generated from tests/generator/golden/features.yaml
// (whose C++ twin generates the same header): C++ accessor names, defaults of optional fields,
// named dims shared by fields, frozen classes.
#include "support/catch_torch.h"

#include <cmath>
#include <string>

#include <ATen/ATen.h>

#include "features.td.h"
#include "support/exception_message.h"

using namespace tensordict;
using golden::features::Cloud;
using golden::features::Frame;
using golden::features::StereoFrame;
using testing_support::message_of;

namespace {

at::Tensor points(int64_t batch, int64_t n) { return at::rand({batch, n, 3}); }

}  // namespace

TEST_CASE("a field with a C++ name keeps its key in storage", "[typed][options]") {
  const at::Tensor index = at::arange(8).reshape({2, 4});
  Cloud cloud({{"points", points(2, 4)}, {"index", index}}, {2});
  CHECK(at::equal(cloud.point_index(), index));
  CHECK(cloud.tensordict().contains("index"));
  CHECK(cloud.has_point_index());
  cloud.set_point_index(index + 1);
  CHECK(at::equal(cloud.tensordict().get("index"), index + 1));
  cloud.set_label("scan");
  CHECK(cloud.tensordict().get_non_tensor("keys").value().as_string() == "scan");
  CHECK(cloud.label() == "scan");
  CHECK(std::string(Cloud::Traits::field_names[2]) == "index");
  CHECK(std::string(Cloud::Traits::fields[3].name) == "keys");
  // The generic setter takes the stored key, as Python's constructor does.
  cloud.set("index", index);
  CHECK(at::equal(cloud.point_index(), index));
  CHECK_THROWS_AS(cloud.set("point_index", index), AttributeError);
}

TEST_CASE("the constructor stores the default of an optional field that is not given", "[typed][options]") {
  Cloud cloud({{"points", points(2, 5)}}, {2});
  CHECK(at::equal(cloud.mask(), at::ones({2, 5}, at::kBool)));
  CHECK(cloud.weight().sizes() == c10::IntArrayRef({2}));
  CHECK(cloud.weight().scalar_type() == at::kFloat);
  CHECK(at::allclose(cloud.weight(), at::full({2}, 0.5)));
  CHECK(cloud.label() == "cloud");
  CHECK(cloud.scale() == 2.0);
  CHECK(cloud.count() == -3);
  CHECK_FALSE(cloud.valid());
  CHECK_FALSE(cloud.has_gram());  // no default
  CHECK_FALSE(cloud.has_point_index());

  SECTION("a given value wins") {
    Cloud given({{"points", points(2, 5)}, {"mask", at::zeros({2, 5}, at::kBool)}, {"count", 7}}, {2});
    CHECK_FALSE(given.mask().any().item<bool>());
    CHECK(given.count() == 7);
  }
  SECTION("a default follows the device given") {
    Cloud on_cpu({{"points", points(2, 5)}}, {2}, at::Device("cpu"));
    CHECK(on_cpu.mask().device().is_cpu());
  }
  SECTION("a named dim nobody gives leaves the default unfillable") {
    CHECK_THAT(message_of<ValueError>([&] { Cloud({}, {2}); }),
             Catch::Contains("Cloud.mask: cannot fill the default, the size of dim N is unknown"));
  }
  SECTION("from_tensordict wraps what is there: no default is added") {
    TensorDict td = TensorDict::empty_with({2});
    td.set("points", points(2, 3));
    Cloud wrapped = Cloud::from_tensordict(td);
    CHECK_FALSE(wrapped.has_mask());
  }
}

TEST_CASE("a default fills the event shape of a typed tensordict with named dims from the given fields",
          "[typed][options]") {
  const at::Tensor image = at::zeros({3, 4, 6, 3}, at::kByte);
  Frame frame({{"image", image}}, {3});
  REQUIRE(frame.depth().sizes() == c10::IntArrayRef({3, 4, 6}));
  CHECK(std::isinf(frame.depth()[0][0][0].item<float>()));
  CHECK(frame.depth()[0][0][0].item<float>() < 0);
}

TEST_CASE("fields sharing a named dim must agree on it", "[typed][options]") {
  Cloud cloud({{"points", points(2, 4)}}, {2});
  CHECK_THAT(message_of<ShapeError>([&] { cloud.set_point_index(at::zeros({2, 5}, at::kLong)); }),
             Catch::Contains("Cloud.index: dim N is 5 here") && Catch::Contains("but 4 in Cloud.points"));
  cloud.set_point_index(at::zeros({2, 4}, at::kLong));
  // A dim named twice in one field.
  CHECK_THAT(message_of<ShapeError>([&] { cloud.set_gram(at::zeros({2, 4, 3}, at::kDouble)); }),
             Catch::Contains("Cloud.gram: the dims named N differ (4 and 3)"));
  cloud.set_gram(at::zeros({2, 4, 4}, at::kDouble));

  SECTION("in the constructor") {
    CHECK_THAT(message_of<ShapeError>([&] { Cloud({{"points", points(2, 4)}, {"mask", at::ones({2, 3}, at::kBool)}}, {2}); }),
             Catch::Contains("dim N is 3 here"));
  }
  SECTION("in from_tensordict, unless unchecked") {
    TensorDict td = TensorDict::empty_with({2});
    td.set("points", points(2, 4));
    td.set("mask", at::ones({2, 3}, at::kBool));
    CHECK_THROWS_AS(Cloud::from_tensordict(td), ShapeError);
    CHECK_NOTHROW(Cloud::from_tensordict(td, /*check=*/false));
  }
  SECTION("across inherited fields") {
    const at::Tensor left = at::zeros({1, 4, 6, 3}, at::kByte);
    CHECK_THAT(message_of<ShapeError>([&] { StereoFrame({{"image", left}, {"right", at::zeros({1, 4, 5, 3}, at::kByte)}}, {1}); }),
             Catch::Contains("StereoFrame.") && Catch::Contains("dim W is"));
    StereoFrame ok({{"image", left}, {"right", left.clone()}}, {1});
    CHECK(ok.depth().sizes() == c10::IntArrayRef({1, 4, 6}));
  }
  SECTION("Traits names the dims") {
    CHECK(Cloud::Traits::dim_names.size() == 1);
    CHECK(std::string(Cloud::Traits::dim_names[0]) == "N");
    REQUIRE(StereoFrame::Traits::dim_names.size() == 2);
    CHECK(std::string(StereoFrame::Traits::dim_names[1]) == "W");
    CHECK(std::string(Cloud::Traits::fields[0].dim_names[0]) == "N");
    CHECK(Cloud::Traits::fields[0].dim_names[1] == nullptr);
  }
}

TEST_CASE("a frozen class is locked after construction and so are its subclasses", "[typed][options]") {
  const at::Tensor image = at::zeros({2, 4, 6, 3}, at::kByte);
  Frame frame({{"image", image}}, {2});
  CHECK(Frame::Traits::frozen);
  CHECK_FALSE(Cloud::Traits::frozen);
  CHECK(frame.is_locked());
  CHECK_THROWS_AS(frame.set_image(image), LockedError);
  CHECK_THROWS_AS(frame.set("extra", at::zeros({2})), LockedError);
  // In place through the backend is what a lock allows.
  frame.set_image_(at::ones({2, 4, 6, 3}, at::kByte));
  CHECK(frame.image().sum().item<int64_t>() == 2 * 4 * 6 * 3);

  StereoFrame stereo({{"image", image}, {"right", image}}, {2});
  CHECK(StereoFrame::Traits::frozen);
  CHECK(stereo.is_locked());

  SECTION("from_tensordict locks what it wraps") {
    TensorDict td = TensorDict::empty_with({2});
    td.set("image", image);
    Frame wrapped = Frame::from_tensordict(td);
    CHECK(wrapped.is_locked());
    CHECK(td.is_locked());  // the same backend
  }
  SECTION("a class that is not frozen is not locked") {
    Cloud cloud({{"points", points(2, 4)}}, {2});
    CHECK_FALSE(cloud.is_locked());
  }
}
