"""NodeResourcesFit and NodeResourcesBalancedAllocation, and the resource arithmetic they share."""
