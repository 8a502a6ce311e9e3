"""Reading published models into run directories (`nmt import`)."""
