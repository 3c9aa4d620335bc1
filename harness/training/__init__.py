"""Native training: one session module per framework behind ``base.TrainSession``."""
