"""The verification gate (`specserve verify`) and the exporter window it reads."""
