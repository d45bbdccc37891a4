"""Tolokaforge Outfitters: the shop site's server side (``routes.ROUTES``), run in the trial's worker."""
