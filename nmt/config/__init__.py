"""The experiment configuration: the sections the data, training and search read (sections.py), the whole
config (schema.py, with the model's section from nmt/models/config.py) and its YAML files (yaml_file.py)."""
