// The generated schemas carry the API's field annotations: google.api.field_behavior, read
// through the package's own copy of google/api/field_behavior.proto.
import { test } from "node:test";
import assert from "node:assert/strict";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { FieldBehavior, field_behavior } from "../gen/google/api/field_behavior_pb.js";
import { LiftRequestSchema, LowerRequestSchema, PlanRequestSchema } from "../gen/compactor/v1/compactor_pb.js";
import { MessageSchema, ToolCallPartSchema } from "../gen/compactor/v1/conversation_pb.js";

test("required fields are marked REQUIRED, others carry no field_behavior", () => {
  for (const f of [
    PlanRequestSchema.field.messages,
    PlanRequestSchema.field.policy,
    LowerRequestSchema.field.provider,
    LiftRequestSchema.field.body,
    MessageSchema.field.role,
    ToolCallPartSchema.field.toolCallId,
  ]) {
    assert.deepEqual(getOption(f, field_behavior), [FieldBehavior.REQUIRED], f.toString());
  }
  for (const f of [LowerRequestSchema.field.model, LiftRequestSchema.field.provider, MessageSchema.field.id]) {
    assert.equal(hasOption(f, field_behavior), false, f.toString());
  }
});
