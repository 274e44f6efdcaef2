// Tests for proxy/chaos/refusal.h.
#include "proxy/chaos/refusal.h"

#include <doctest/doctest.h>

using kproxy::chaos::note_refusal;
using kproxy::chaos::Refusal;

TEST_CASE("note_refusal: malformed wins over unprocessable, which wins over conflict") {
  Refusal worst = Refusal::kNone;
  note_refusal(worst, Refusal::kNone);
  CHECK(worst == Refusal::kNone);
  note_refusal(worst, Refusal::kConflict);
  CHECK(worst == Refusal::kConflict);
  note_refusal(worst, Refusal::kUnprocessable);
  CHECK(worst == Refusal::kUnprocessable);
  note_refusal(worst, Refusal::kConflict);
  CHECK(worst == Refusal::kUnprocessable);
  note_refusal(worst, Refusal::kMalformed);
  CHECK(worst == Refusal::kMalformed);
  note_refusal(worst, Refusal::kUnprocessable);
  CHECK(worst == Refusal::kMalformed);
}
