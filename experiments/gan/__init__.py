"""Single-GAN training experiment: any data set, model, loss and game scheme."""
