"""The cost function and its price table live with the model data (`actors/_cost.py`:
a turn's own warnings count cost too); the face's modules take them from here."""

from actors import NO_COST, Cost, cost, input_cost, records_cost

__all__ = ["NO_COST", "Cost", "cost", "input_cost", "records_cost"]
