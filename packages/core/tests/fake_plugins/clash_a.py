from fake_plugins.clashing import hooks

globals().update(hooks("a"))
