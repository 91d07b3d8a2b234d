"""The request and response bodies of every route (pydantic), and the size checks on an item's values that turn a
hostile body into a 4xx naming its field."""
