"""Harbor & Pine tools (tau-style): one class per tool, ``get_info()`` and ``invoke(data, **kwargs)``.

``category`` on each class tags it read / write / compute (tau2-bench's READ/WRITE tags).
"""

from __future__ import annotations

from .compute import Calculate, QuoteRefund
from .read import (
    FindCustomerByEmail,
    GetCoupon,
    GetCustomerDetails,
    GetOrderDetails,
    GetProductDetails,
    GetStoreCreditHistory,
    ListCustomerOrders,
    ListReturns,
    SearchProducts,
)
from .write import (
    ApplyCoupon,
    CancelOrder,
    ChangePaymentMethod,
    CreateReturn,
    CreateSupportTicket,
    IssueStoreCredit,
    TransferToHumanAgents,
    UpdateShippingAddress,
)

__all__ = ["TOOLS"]

TOOLS = [
    FindCustomerByEmail,
    GetCustomerDetails,
    ListCustomerOrders,
    GetOrderDetails,
    GetProductDetails,
    SearchProducts,
    GetCoupon,
    ListReturns,
    GetStoreCreditHistory,
    Calculate,
    QuoteRefund,
    CancelOrder,
    UpdateShippingAddress,
    ApplyCoupon,
    ChangePaymentMethod,
    CreateReturn,
    IssueStoreCredit,
    CreateSupportTicket,
    TransferToHumanAgents,
]
