"""The generated descriptors keep the API's field annotations (google.api.field_behavior) as
the bytes of their field options, although the package leaves google/api/field_behavior.proto
out: googleapis-common-protos, when installed, reads them as the extension."""

from compactord import ir, pb

# Field 1052 (google.api.field_behavior), varint 2 (REQUIRED).
REQUIRED = b"\xe0\x41\x02"


def options(message, field):
    return message.DESCRIPTOR.fields_by_name[field].GetOptions().SerializeToString()


def test_required_fields_carry_the_annotation():
    for message, field in [
        (pb.PlanRequest, "messages"),
        (pb.PlanRequest, "policy"),
        (pb.LowerRequest, "provider"),
        (pb.LiftRequest, "body"),
        (ir.Message, "role"),
        (ir.ToolCallPart, "tool_call_id"),
    ]:
        assert options(message, field) == REQUIRED, (message.DESCRIPTOR.name, field)


def test_other_fields_carry_none():
    for message, field in [(pb.LowerRequest, "model"), (pb.LiftRequest, "provider"), (ir.Message, "id")]:
        assert options(message, field) == b"", (message.DESCRIPTOR.name, field)
