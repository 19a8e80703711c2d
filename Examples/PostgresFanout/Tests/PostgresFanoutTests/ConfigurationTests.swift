import PostgresFanout
import Testing

/// What runs without PostgreSQL.
struct ConfigurationTests {
    @Test func settingsFromTheEnvironment() {
        #expect(PostgresSettings.fromEnvironment([:]) == nil)
        let settings = PostgresSettings.fromEnvironment([
            "POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": "54321", "POSTGRES_USER": "fanout",
            "POSTGRES_DB": "fanoutdb",
        ])
        #expect(settings == PostgresSettings(host: "127.0.0.1", port: 54321, username: "fanout", database: "fanoutdb"))
    }

    @Test func applicationNamesIdentifyTheInstance() throws {
        let settings = PostgresSettings(host: "127.0.0.1", username: "fanout", database: "fanout")
        let configuration = FanoutConfiguration(instanceName: "a", postgres: settings)
        #expect(configuration.listenApplicationName == "fanout-a-listen")
        #expect(configuration.notifyApplicationName == "fanout-a-notify")
    }
}
