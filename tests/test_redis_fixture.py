async def test_redis_fixture_answers(redis_client):
    await redis_client.set("k", "v")
    assert await redis_client.get("k") == b"v"
