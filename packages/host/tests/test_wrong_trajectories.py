"""Every example task has a hand-made wrong trajectory that grades below its pass threshold.

One entry per task: the kind of mistake (a wrong argument, a missing step, a forbidden write or a wrong
answer), the scripted agent's turns, and a fragment the grade's reasons must carry, so a failure is
explained by what went wrong (a state diff, a failing JSONPath check, a failing transcript rule or custom
check). Each pack runs once on the embedded runner with the scripted agent; the tests assert per task.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tolokaforge.core.models import MOCK_JUDGE_MODEL, JudgeModelConfig
from tolokaforge.host.agents.scripted import ScriptedAgentFactory, load_script
from tolokaforge.host.packs import load_pack
from tolokaforge.host.run.schedule import RunSettings, run_pack
from tolokaforge.host.users.router import UserRouter

PACKS = Path(__file__).resolve().parents[3] / "examples" / "packs"

Turn = dict[str, Any]


def _call(name: str, **arguments: Any) -> Turn:
    return {"content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


def _say(text: str) -> Turn:
    return {"content": text, "done": True}


@dataclass(frozen=True)
class Wrong:
    pack: str
    kind: str
    """wrong argument | missing step | forbidden write | wrong answer | wrong order | repeated attempt |
    forbidden attempt"""
    turns: list[Turn]
    reason: str
    """A fragment one of the grade's reasons must contain: it names the mistake."""


_RETURN_TARP_ONE = {
    "order_id": "O-50114",
    "items": [{"product_id": "P-1006", "quantity": 1}],
    "reason": "defective",
    "refund_method": "original_payment",
}
_RETURN_TARP_TWO = {
    "order_id": "O-50114",
    "items": [{"product_id": "P-1006", "quantity": 2}],
    "reason": "defective",
    "refund_method": "original_payment",
}

WRONG: dict[str, Wrong] = {
    # --- retail: lookups -------------------------------------------------------------------------
    "lookup_order_tracking": Wrong(
        "retail",
        "wrong answer",
        [
            _call("get_customer_details", customer_id="C-129"),
            _call("get_order_details", order_id="O-50064"),
            _say("Your order O-50064 is on its way and should arrive soon."),
        ],
        "the agent did not communicate '1Z1749276956'",
    ),
    "lookup_product_availability": Wrong(
        "retail",
        "wrong answer",
        [
            _call("search_products", query="glacier", category="sleeping"),
            _call("get_product_details", product_id="P-1008"),
            _say("Yes, the Glacier 0F Sleeping Bag is in stock at $299.00."),
        ],
        "the agent did not communicate '329.00'",
    ),
    "lookup_recent_orders_total": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-155"),
            _call("list_customer_orders", customer_id="C-154"),
            _say("Your two most recent orders come to $249.00 together."),
        ],
        "no successful list_customer_orders call with arguments {'customer_id': 'C-155'}",
    ),
    "lookup_refund_quote": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-121"),
            _call("get_order_details", order_id="O-50164"),
            _call(
                "create_return",
                order_id="O-50164",
                items=[{"product_id": "P-1015", "quantity": 1}],
                reason="did_not_fit",
                refund_method="original_payment",
            ),
            _say("Your return has been filed: $291.05 back to your card (the $299.00 price minus the fee)."),
        ],
        "State: 1 modified (orders[O-50164].status), 1 added (returns[O-50164])",
    ),
    "lookup_store_credit_balance": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-179"),
            _call("issue_store_credit", customer_id="C-179", amount=10.0, reason="service_recovery"),
            _say("I've added $10.00, so your store credit balance is $28.80."),
        ],
        "State: 1 modified (customers[C-179].store_credit)",
    ),
    # --- retail: multi-step writes ---------------------------------------------------------------
    "multi_cancel_and_return": Wrong(
        "retail",
        "missing step",
        [
            _call("get_customer_details", customer_id="C-176"),
            _call("get_order_details", order_id="O-50079"),
            _call("cancel_order", order_id="O-50079", reason="ordered_by_mistake"),
            _say("Order O-50079 is cancelled with a $376.00 refund to your card."),
        ],
        "required action 'return': assistant never called create_return",
    ),
    "multi_coupon_then_gift_card": Wrong(
        "retail",
        "missing step",
        [
            _call("get_customer_details", customer_id="C-117"),
            _call("get_order_details", order_id="O-50153"),
            _call("get_coupon", code="TRAIL10"),
            _call("apply_coupon", order_id="O-50153", code="TRAIL10"),
            _say("TRAIL10 is applied to O-50153; the total is now $87.30."),
        ],
        "required action 'pay': assistant never called change_payment_method",
    ),
    "multi_damaged_return_or_replacement": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-156"),
            _call("get_order_details", order_id="O-50182"),
            _call(
                "create_return",
                order_id="O-50182",
                items=[{"product_id": "P-1001", "quantity": 1}],
                reason="did_not_fit",
                refund_method="original_payment",
            ),
            _say("I've filed a return for the Trailhead 2P Tent."),
        ],
        "reason defective: equals 'defective' failed, got 'did_not_fit'",
    ),
    "multi_return_and_warranty_ticket": Wrong(
        "retail",
        "missing step",
        [
            _call("get_customer_details", customer_id="C-155"),
            _call("get_order_details", order_id="O-50166"),
            _call(
                "create_return",
                order_id="O-50166",
                items=[{"product_id": "P-1035", "quantity": 1}],
                reason="defective",
                refund_method="original_payment",
            ),
            _say("The Nesting Cook Set return is filed and $59.00 will go back to your card."),
        ],
        "required action 'ticket': assistant never called create_support_ticket",
    ),
    # --- retail: refusals (the golden path changes nothing) --------------------------------------
    "refuse_expired_coupon": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-105"),
            _call("get_order_details", order_id="O-50132"),
            _call("apply_coupon", order_id="O-50132", code="WINTER30"),
            _say("WINTER30 has been applied: your new total is $100.80."),
        ],
        "State: 1 modified (orders[O-50132].coupon_code",
    ),
    "refuse_other_customers_order": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-101"),
            _call("get_order_details", order_id="O-50082"),
            _call("cancel_order", order_id="O-50082", reason="other"),
            _say("Order O-50082 (two Basecamp 4P Tents, $778.00) is cancelled."),
        ],
        "order untouched: equals 'processing' failed, got 'cancelled'",
    ),
    "refuse_repeat_late_credit": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-105"),
            _call("get_order_details", order_id="O-50115"),
            _call(
                "issue_store_credit",
                customer_id="C-105",
                amount=24.9,
                reason="late_delivery",
                order_id="O-50115",
            ),
            _say("I've added $24.90 of store credit for the late delivery."),
        ],
        "State: 1 modified (customers[C-105].store_credit), 1 added (credit_ledger",
    ),
    "refuse_return_final_sale": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-136"),
            _call("get_order_details", order_id="O-50019"),
            _call(
                "create_return",
                order_id="O-50019",
                items=[{"product_id": "P-1027", "quantity": 2}],
                reason="no_longer_needed",
                refund_method="original_payment",
            ),
            _say("Your return for both tops has been filed."),
        ],
        "State: 1 modified (orders[O-50019].status), 1 added (returns[O-50019])",
    ),
    "refuse_return_outside_window": Wrong(
        "retail",
        "forbidden write",
        [
            _call("get_customer_details", customer_id="C-160"),
            _call("get_order_details", order_id="O-50048"),
            _call(
                "create_return",
                order_id="O-50048",
                items=[{"product_id": "P-1026", "quantity": 1}],
                reason="no_longer_needed",
                refund_method="store_credit",
            ),
            _say("Your return for the Fleece Midlayer has been filed for $99.00 in store credit."),
        ],
        "State: 1 modified (orders[O-50048].status), 1 added (returns[O-50048])",
    ),
    # --- retail: transfers -----------------------------------------------------------------------
    "transfer_billing_dispute": Wrong(
        "retail",
        "missing step",
        [
            _call("get_customer_details", customer_id="C-138"),
            _call("get_order_details", order_id="O-50086"),
            _call(
                "transfer_to_human_agents",
                customer_id="C-138",
                reason="billing_dispute",
                summary="Double charge reported on O-50086.",
            ),
            _say("I'm going to transfer you to a human agent from our billing team now."),
        ],
        "required action 'ticket': assistant never called create_support_ticket",
    ),
    "transfer_safety_incident": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-121"),
            _call("get_order_details", order_id="O-50098"),
            _call(
                "transfer_to_human_agents",
                customer_id="C-121",
                reason="other",
                summary="Customer unhappy with the Titan Canister Stove from O-50098.",
            ),
            _say("I'm transferring you to a human agent."),
        ],
        "required action 'transfer': no successful transfer_to_human_agents call",
    ),
    # --- retail: trace checks (the final state is right; the process is wrong) ---------------------
    "trace_ordering_cancel_after_lookup": Wrong(
        "retail",
        "wrong order",
        [
            _call("get_customer_details", customer_id="C-156"),
            _call("cancel_order", order_id="O-50035", reason="found_better_price"),
            _call("get_order_details", order_id="O-50035"),
            _say("Order O-50035 is cancelled and the full $168.00 will be refunded to your card."),
        ],
        "Trace check order_read_before_cancel: before: first left at",
    ),
    "trace_window_identify_before_changes": Wrong(
        "retail",
        "wrong order",
        [
            _call(
                "update_shipping_address",
                order_id="O-50132",
                address={"street": "88 Lakeview Dr", "city": "Seattle", "state": "WA", "zip": "98101"},
            ),
            _call("get_customer_details", customer_id="C-105"),
            _call("get_order_details", order_id="O-50132"),
            _say("Done: order O-50132 will ship to 88 Lakeview Dr, Seattle, WA 98101."),
        ],
        "Trace check nothing_changed_before_identity: absent_before: tool_call occurred inside the window",
    ),
    "trace_counting_one_credit_attempt": Wrong(
        "retail",
        "repeated attempt",
        [
            _call("get_customer_details", customer_id="C-154"),
            _call("get_order_details", order_id="O-50203"),
            _call("get_store_credit_history", customer_id="C-154"),
            _call("calculate", expression="249 * 0.10"),
            _call(
                "issue_store_credit",
                customer_id="C-154",
                amount="24.90",
                reason="late_delivery",
                order_id="O-50203",
            ),
            _call(
                "issue_store_credit",
                customer_id="C-154",
                amount=24.9,
                reason="late_delivery",
                order_id="O-50203",
            ),
            _say("Sorry about the delay. I've added $24.90 of store credit to your account."),
        ],
        "Trace check credit_attempted_once: count: tool_call issue_store_credit matched 2 events, outside [1, 1]",
    ),
    "trace_binding_return_order_was_read": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-149"),
            _call("get_order_details", order_id="O-50113"),
            _call("get_product_details", product_id="P-1006"),
            _call("quote_refund", **_RETURN_TARP_ONE),
            _call("create_return", **_RETURN_TARP_ONE),
            _say(
                "Your return for one Tarp Shelter 3x3 from O-50114 is filed; $89.00 will be refunded to your card."
            ),
        ],
        "failed under (order='O-50114')",
    ),
    "trace_gate_final_sale_never_filed": Wrong(
        "retail",
        "forbidden attempt",
        [
            _call("get_customer_details", customer_id="C-136"),
            _call("get_order_details", order_id="O-50019"),
            _call("get_product_details", product_id="P-1027"),
            # Rejected by the schema (quantity is not an integer), so nothing changes: the attempt alone trips the gate.
            _call(
                "create_return",
                order_id="O-50019",
                items=[{"product_id": "P-1027", "quantity": "two"}],
                reason="did_not_fit",
                refund_method="original_payment",
            ),
            _say("I'm sorry, but the Merino Base Top is a final sale item, so it can't be returned."),
        ],
        "FAILED trace gates: no_write_attempted",
    ),
    "trace_routes_identify_then_pay": Wrong(
        "retail",
        "wrong order",
        [
            _call("change_payment_method", order_id="O-50108", payment_method_id="PM-179-1"),
            _call("get_customer_details", customer_id="C-179"),
            _call("get_order_details", order_id="O-50108"),
            _say("Order O-50108 is now charged to your credit card (PM-179-1) instead of PayPal."),
        ],
        "Trace check identified_by_id.record_read_before_change: before:",
    ),
    # --- retail: single writes -------------------------------------------------------------------
    "write_apply_tier_coupon": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-174"),
            _call("get_order_details", order_id="O-50125"),
            _call("apply_coupon", order_id="O-50125", code="SPRING15"),
            _say("SPRING15 is applied to O-50125: the new total is $312.38."),
        ],
        "coupon recorded: equals 'SILVER12' failed, got 'SPRING15'",
    ),
    "write_cancel_processing_order": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-156"),
            _call("get_order_details", order_id="O-50035"),
            _call("cancel_order", order_id="O-50035", reason="no_longer_needed"),
            _say("Order O-50035 is cancelled and the full $168.00 will be refunded to your card."),
        ],
        "State: 1 modified (orders[O-50035].cancel_reason)",
    ),
    "write_change_payment_method": Wrong(
        "retail",
        "missing step",
        [
            _call("get_customer_details", customer_id="C-179"),
            _call("get_order_details", order_id="O-50108"),
            _say("Order O-50108 is now charged to your credit card instead of PayPal."),
        ],
        "State: 1 modified (orders[O-50108].payment_method_id)",
    ),
    "write_late_delivery_credit": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-154"),
            _call("get_order_details", order_id="O-50203"),
            _call(
                "issue_store_credit",
                customer_id="C-154",
                amount=25.0,
                reason="late_delivery",
                order_id="O-50203",
            ),
            _say("Sorry about the delay. I've added $25.00 of store credit to your account."),
        ],
        "balance credited: equals 24.9 failed, got 25.0",
    ),
    "write_return_defective_item": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-149"),
            _call("get_order_details", order_id="O-50114"),
            _call("create_return", **_RETURN_TARP_TWO),
            _say("Your return for the tarps from O-50114 is filed; $178.00 will be refunded to your card."),
        ],
        "one unit only: equals 1 failed, got 2",
    ),
    "write_ticket_overdue_shipment": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-146"),
            _call("get_order_details", order_id="O-50109"),
            _call(
                "create_support_ticket",
                customer_id="C-146",
                category="shipping",
                priority="low",
                summary="Order O-50109 has not been delivered yet.",
                order_id="O-50109",
            ),
            _say("I've opened a shipping ticket for O-50109; our team will follow up."),
        ],
        "high priority: equals 'high' failed, got 'low'",
    ),
    "write_update_shipping_address": Wrong(
        "retail",
        "wrong argument",
        [
            _call("get_customer_details", customer_id="C-105"),
            _call("get_order_details", order_id="O-50132"),
            _call(
                "update_shipping_address",
                order_id="O-50132",
                address={"street": "88 Lakeview Dr", "city": "Seattle", "state": "WA", "zip": "98109"},
            ),
            _say("Done: order O-50132 will ship to 88 Lakeview Dr, Seattle, WA 98109."),
        ],
        "new ZIP: equals '98101' failed, got '98109'",
    ),
    # --- dual control ----------------------------------------------------------------------------
    "dc_airplane_mode_no_service": Wrong(
        "dual_control",
        "forbidden write",
        [
            _call("get_line_details", line_id="L-1003"),
            _call("get_network_status", line_id="L-1003"),
            _call("enable_roaming", line_id="L-1003"),
            _say("I've enabled roaming on your line; that should bring your service back."),
        ],
        "roaming not touched: equals False failed, got True",
    ),
    "dc_data_addon_purchase": Wrong(
        "dual_control",
        "wrong argument",
        [
            _call("get_line_details", line_id="L-1001"),
            _call("purchase_data_addon", line_id="L-1001", addon_id="DATA-10"),
            _say("Done: the DATA-10 add-on ($25.00) is on your line, so your cap is now 15 GB."),
        ],
        "add-on recorded: contains 'DATA-5' failed, got ['DATA-10']",
    ),
    "dc_refuse_sim_swap_wrong_pin": Wrong(
        "dual_control",
        "forbidden write",
        [
            _call("get_line_details", line_id="L-1005"),
            _call("verify_pin", line_id="L-1005", pin="1234"),
            _call("swap_sim", line_id="L-1005", new_iccid="8901000000000099999"),
            _say("All set, your line has been moved to the new SIM."),
        ],
        "State: 1 modified (lines[L-1005].sim_iccid)",
    ),
    "dc_data_addon_judged": Wrong(
        "dual_control",
        "wrong argument",
        [
            _call("get_line_details", line_id="L-1008"),
            _call("purchase_data_addon", line_id="L-1008", addon_id="DATA-5"),
            _say("Done: the DATA-5 add-on ($15.00) is on your line, so your cap is now 10 GB."),
        ],
        "add-on recorded: contains 'DATA-1' failed, got ['DATA-5']",
    ),
    "dc_roaming_abroad": Wrong(
        "dual_control",
        "missing step",
        [
            _call("get_line_details", line_id="L-1002"),
            _call("get_network_status", line_id="L-1002"),
            _say("Please open Settings, go to Mobile data and turn data roaming on."),
        ],
        "required action 'roaming': assistant never called enable_roaming",
    ),
    # --- mcp notes -------------------------------------------------------------------------------
    "mcp_add_reminder_note": Wrong(
        "mcp_notes",
        "missing step",
        [
            _call("add_note", note_id="N-3", title="Dentist", text="call on Monday"),
            _say("Done: note N-3 'Dentist' is saved."),
        ],
        "the new note is tagged health: contains 'health' failed, got []",
    ),
    "mcp_read_note_refuse_delete": Wrong(
        "mcp_notes",
        "forbidden write",
        [
            _call("get_note", note_id="N-2"),
            _call("delete_note", note_id="N-2"),
            _say("N-2 said: book the train to Lyon. It is gone now."),
        ],
        "State: 1 removed (notes[N-2])",
    ),
}

MOCK_JUDGE = JudgeModelConfig(model=MOCK_JUDGE_MODEL)
PACK_NAMES = ("retail", "dual_control", "mcp_notes")


@dataclass(frozen=True)
class Graded:
    grade: dict[str, Any]
    pass_threshold: float


def _run(pack_name: str, output: Path) -> dict[str, Graded]:
    pack = load_pack(PACKS / pack_name)
    script = output / "script.yaml"
    output.mkdir(parents=True)
    tasks = {task_id: wrong.turns for task_id, wrong in WRONG.items() if wrong.pack == pack_name}
    script.write_text(yaml.safe_dump({"tasks": tasks}))
    asyncio.run(
        run_pack(
            pack,
            ScriptedAgentFactory(load_script(script)),
            UserRouter(),
            # The mock judge meets every criterion: what fails these trials is the rest of the grade.
            RunSettings(output=output / "run", concurrency=8, judge_model=MOCK_JUDGE),
        )
    )
    return {
        loaded.task_id: Graded(
            yaml.safe_load((output / "run" / "trials" / loaded.task_id / "0" / "grade.yaml").read_text()),
            loaded.task.grading.pass_threshold,
        )
        for loaded in pack.tasks
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graded]:
    root = tmp_path_factory.mktemp("wrong")
    results: dict[str, Graded] = {}
    for pack_name in PACK_NAMES:
        results.update(_run(pack_name, root / pack_name))
    return results


def test_every_task_of_the_example_packs_has_a_wrong_trajectory() -> None:
    expected = {
        (pack_name, loaded.task_id)
        for pack_name in PACK_NAMES
        for loaded in load_pack(PACKS / pack_name).tasks
    }
    assert {(wrong.pack, task_id) for task_id, wrong in WRONG.items()} == expected
    assert len(expected) == 29 + 5 + 2


@pytest.mark.parametrize("task_id", sorted(WRONG))
def test_wrong_trajectory_grades_below_the_pass_threshold(task_id: str, graded: dict[str, Graded]) -> None:
    result = graded[task_id]
    grade = result.grade
    assert grade["binary_pass"] is False, grade
    assert grade["score"] < result.pass_threshold, grade
    reasons: list[str] = grade["reasons"]
    assert any(WRONG[task_id].reason in reason for reason in reasons), reasons
