import AsyncMulticast
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

    @Test func eachClientHasAHardAndASoftLimit() {
        let settings = PostgresSettings(host: "127.0.0.1", username: "fanout", database: "fanout")
        let defaults = FanoutConfiguration(instanceName: "a", postgres: settings)
        #expect(defaults.bufferingPolicy == .evicting(4096, softLimit: .above(256, for: .seconds(10))))
        let tight = FanoutConfiguration(
            instanceName: "a", postgres: settings, hardLimit: 100, softLimit: 0, softLimitDuration: .zero)
        #expect(tight.bufferingPolicy == .evicting(100, softLimit: .above(0, for: .zero)))
    }
}
